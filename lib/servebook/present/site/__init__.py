"""The static site: the journal rendered for readers, working from file:// with no network."""
