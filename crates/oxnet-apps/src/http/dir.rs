//! DIR: the files of a directory (recursively) as pinned objects, each
//! under `/` and its path, with the validators nginx gives static files
//! (Last-Modified: the mtime; ETag: mtime and size in hex).

use super::cache::Cache;
use super::object::{content_type, Headers};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// More files than this is a configuration error (a bound on start-up).
const MAX_FILES: usize = 100_000;

/// Loads every regular file under `root`; the number loaded.
pub fn load(cache: &mut Cache, root: &Path) -> Result<usize, String> {
    let mut count = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("DIR {}: {e}", dir.display()))?;
        let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            count += 1;
            if count > MAX_FILES {
                return Err(format!("DIR {}: more than {MAX_FILES} files", root.display()));
            }
            let rel = path.strip_prefix(root).map_err(|e| e.to_string())?;
            let key = format!("/{}", rel.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/"));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            let headers = Headers {
                content_type: Some(content_type(&key).to_string()),
                last_modified: Some(mtime),
                etag: Some(format!("\"{mtime:x}-{:x}\"", bytes.len())),
                cache_control: None,
                expires: None,
            };
            let object = cache
                .make_object(&bytes, &headers)
                .ok_or_else(|| format!("DIR {}: the files do not fit in MEMORY", root.display()))?;
            cache.pin(&key, object);
        }
    }
    Ok(count)
}
