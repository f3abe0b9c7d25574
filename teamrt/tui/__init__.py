"""The Textual TUI (``teamrt tui``): what it shows is read from the store, never written there."""
