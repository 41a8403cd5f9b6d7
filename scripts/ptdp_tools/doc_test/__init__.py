"""The documents' checks (ctest Docs.*; docs/ARCHITECTURE.md, "Documentation tests"): documents
(reading Markdown), classes, flags, paths and run (the four checks) and cli (`doc_test.py`)."""
