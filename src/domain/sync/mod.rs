//! Sync's pure rules (docs/sync.md): stamps and the hybrid logical clock, the replicated state's
//! registers and how they merge, operations and checkpoints as they travel, a session's tree laid
//! out as rows and read back, the settings that sync, and sets of applied numbers.

pub mod op;
pub mod ranges;
pub mod regs;
pub mod settings;
pub mod stamp;
pub mod tree;
