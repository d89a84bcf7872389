from tests.consumers.conftest import ibdump  # noqa: F401  (the Go reader, shared)
