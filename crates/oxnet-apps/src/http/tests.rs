//! In-process tests of the cache: stream packets in, exact bytes out.
