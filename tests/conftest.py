"""Suite-wide setup.

MindSpore's generated protobuf modules need the pure-Python protobuf backend; importing it picks
that backend only when protobuf is not loaded yet. Streamlit (AppTests) and tensorboardX load
protobuf first, so the whole suite uses the pure-Python backend, as a MindSpore process does.
"""

import os

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

# Fixtures for the object-storage tests (a moto S3 server on 127.0.0.1): moto_server, s3_env.
pytest_plugins = ["tests.objectstore"]
