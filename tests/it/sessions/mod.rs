//! Saved sessions, keeps, search and import.

mod import;
mod keeps;
mod keeps_properties;
mod pages;
mod saved;
mod search_index;
