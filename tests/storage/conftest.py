from tests.objectstore import moto_server, s3_env  # noqa: F401 - fixtures
