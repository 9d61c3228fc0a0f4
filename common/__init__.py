"""The ground of corpusflow: settings, errors, deadlines, process lifelines, ZIP
guards and import helpers. It imports no stage, no engine and no face
(docs/architecture.md, tests/test_layers.py)."""
