"""The emulated Kubernetes API server: kmock's emulator made strict enough for kopf, the
`kubernetes` client and kubectl (`emulator.py`), what it checks before it stores a write
(`admission/`), what it does to the objects it stores (`registry/`), and what kubectl reads
from it (tables, OpenAPI, Pod logs)."""
