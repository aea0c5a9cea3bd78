//! Neighbour resolution (placeholder while being written).

pub mod cache;

#[cfg(test)]
mod cache_tests;
