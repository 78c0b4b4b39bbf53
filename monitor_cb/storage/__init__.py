"""Runs on object storage (S3, Huawei OBS, MinIO, Ceph; any fsspec URL): the shared pieces.

``urls`` (URL parsing, options, redaction), ``objects`` (the few store operations), ``chunks``
(the object layout, ``docs/FORMAT.md``), ``shipper`` (the writing side's background uploader); the
``sync`` command is :mod:`monitor_cb.commands.sync`. fsspec is imported only when a remote location is opened.
"""
