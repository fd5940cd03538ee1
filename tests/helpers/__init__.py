"""Plain helpers the tests share: candidates and plans, the CLI as a user runs it, request records and journals.
Fixtures stay in conftest.py; nothing imports from a conftest."""
