"""The replay web service: the archive as a website, by date (``archiver replay``)."""
