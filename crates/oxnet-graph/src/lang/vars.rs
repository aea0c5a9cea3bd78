//! Configuration strings: splitting into arguments and expanding
//! parameters (click(5), "CONFIGURATION STRINGS" and "Configuration
//! parameters").

/// Splits a configuration string into its comma-separated arguments.
/// Commas inside quotes or nested parentheses do not split; comments
/// become a space; each argument is trimmed; a last argument that is empty
/// is dropped (`X(1, )` is `X(1)`), so an empty string has no arguments.
pub fn split_args(config: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut chars = config.chars().peekable();
    let mut depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => push_quoted(c, &mut chars, &mut cur),
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                cur.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                cur.push(' ');
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' if depth == 0 => args.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    let last = cur.trim().to_string();
    if !last.is_empty() {
        args.push(last);
    }
    args
}

/// Copies a quoted string that opened with `quote` (already read) into
/// `out`, the closing quote included; in double quotes a backslash
/// protects the next character (click(5), "Quoting").
fn push_quoted(quote: char, chars: &mut impl Iterator<Item = char>, out: &mut String) {
    out.push(quote);
    while let Some(d) = chars.next() {
        out.push(d);
        if d == '\\' && quote == '"' {
            if let Some(e) = chars.next() {
                out.push(e);
            }
        } else if d == quote {
            break;
        }
    }
}

/// Splits an argument into space-separated words, quotes kept together.
pub fn split_words(arg: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut chars = arg.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => push_quoted(c, &mut chars, &mut cur),
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Replaces parameter references in `text`: `$name`, `${name}`,
/// `${name-default}` and `${name[i]}` (the i-th space-separated word of
/// the value, empty when there is none; `i` may itself be a reference).
/// References inside single quotes stay as written; so do references to
/// parameters `lookup` does not know (Click leaves them for the element to
/// report).
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_single = false;
    let mut in_double = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' && !in_double {
            in_single = !in_single;
        } else if c == b'"' && !in_single {
            in_double = !in_double;
        } else if c == b'\\' && in_double && i + 1 < b.len() {
            out.push_str(&text[i..i + 2]);
            i += 2;
            continue;
        } else if c == b'$' && !in_single {
            if let Some((replacement, used)) = reference(&text[i..], lookup) {
                out.push_str(&replacement);
                i += used;
                continue;
            }
        }
        // Push the whole (possibly multi-byte) character.
        let len = text[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&text[i..i + len]);
        i += len;
    }
    out
}

/// One reference at the start of `text` (which starts with `$`): its
/// value and the bytes it spans, or None to leave it as written.
fn reference(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Option<(String, usize)> {
    let b = text.as_bytes();
    if b.get(1) == Some(&b'{') {
        let close = matching_brace(text)?;
        let inner = &text[2..close];
        let name_len = inner
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
            .count();
        if name_len == 0 {
            return None;
        }
        let name = &inner[..name_len];
        let rest = &inner[name_len..];
        let value = if let Some(default) = rest.strip_prefix('-') {
            lookup(name).unwrap_or_else(|| expand(default, lookup))
        } else if let Some(index) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let value = lookup(name)?;
            let index = expand(index, lookup);
            let words = split_words(&value);
            index
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|n| words.get(n).cloned())
                .unwrap_or_default()
        } else if rest.is_empty() {
            lookup(name)?
        } else {
            return None;
        };
        Some((value, close + 1))
    } else {
        let name_len = b[1..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if name_len == 0 {
            return None;
        }
        Some((lookup(&text[1..1 + name_len])?, 1 + name_len))
    }
}

fn matching_brace(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "a" => Some("A B C".into()),
            "n" => Some("2".into()),
            "dev" => Some("eth0".into()),
            _ => None,
        }
    }

    #[test]
    fn arguments_split_on_top_level_commas_and_lose_comments() {
        assert_eq!(split_args("1, 2 ,3"), ["1", "2", "3"]);
        assert_eq!(split_args("\"a, b\", 'c,d', f(1,2)"), ["\"a, b\"", "'c,d'", "f(1,2)"]);
        // click(5): Element(1, ), Element(1, /* comment */) and Element(1)
        // are alike.
        assert_eq!(split_args("1, "), ["1"]);
        assert_eq!(split_args("1, /* comment */"), ["1"]);
        assert_eq!(split_args("1 // two\n, 3"), ["1", "3"]);
        assert!(split_args("").is_empty());
        assert!(split_args("  /* nothing */ ").is_empty());
        assert_eq!(split_args(", 2"), ["", "2"]);
    }

    #[test]
    fn references_expand_as_click_5_says() {
        assert_eq!(expand("$dev x", &vars), "eth0 x");
        assert_eq!(expand("${dev}x", &vars), "eth0x");
        assert_eq!(expand("$devx", &vars), "$devx", "unknown names stay");
        assert_eq!(expand("${nope-fallback} ${dev-no}", &vars), "fallback eth0");
        assert_eq!(expand("'$dev' \"$dev\"", &vars), "'$dev' \"eth0\"");
        // Indexed words (Click's compound/variables-01 test).
        assert_eq!(expand("${a[0]}|${a[2]}|${a[3]}|${a[$n]}", &vars), "A|C||C");
        assert_eq!(expand("cost $5 ${", &vars), "cost $5 ${");
    }
}
