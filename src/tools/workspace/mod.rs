//! The workspace tools: read, write, edit, list, find, grep and delete (and bash).
