"""The immutable tree snapshot that FUSE serves and ``render`` writes."""
