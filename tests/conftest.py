# Shared emulator fixtures (`emulator`, `api`); each suite brings its own `kubeconfig`.
pytest_plugins = ["tests.support.fixtures"]
