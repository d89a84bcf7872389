from tests.containers.conftest import hosttools_image  # noqa: F401  (shared image)
