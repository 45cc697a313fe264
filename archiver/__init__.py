"""archiver: an archival web crawler that crawls site by site into WARC bundles."""

__version__ = "0.1.0"
