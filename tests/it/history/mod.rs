//! The live history: appends, attaches, events and the change log.

mod attach;
mod changes;
mod live;
