//! Browser registration (`install`, `uninstall`, `doctor`) and the installer scripts.

mod installers;
mod registration;
