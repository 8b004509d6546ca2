"""open_store: a store from its URL."""

from pathlib import Path
from urllib.parse import unquote, urlparse

from .errors import InvalidStoreUrl
from .local import LocalStore


def open_store(url: str, endpoint: str | None = None, credentials=None, progress: bool = True,
               **s3_options):
    """A local path or file:///path -> LocalStore; s3://BUCKET[/PREFIX] -> S3Store (endpoint:
    the S3-compatible server's URL, e.g. http://127.0.0.1:7070; None for AWS itself).
    credentials: None for anonymous reads, else (access_key, secret_key) or Credentials.
    s3_options: part_size, concurrency, region."""
    if not isinstance(url, str) or not url:
        raise InvalidStoreUrl("a snapshot store URL is a path, file:///PATH or s3://BUCKET/PREFIX")
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        from .s3 import S3Store  # boto3 is only imported when a bucket is used
        return S3Store(parsed.netloc, unquote(parsed.path), endpoint=endpoint,
                       credentials=credentials, progress=progress, **s3_options)
    if endpoint is not None:
        raise InvalidStoreUrl(f"an endpoint ({endpoint}) is only for s3:// stores, not {url}")
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise InvalidStoreUrl(f"{url}: file URLs name a local path (file:///PATH)")
        return LocalStore(Path(unquote(parsed.path)), progress=progress)
    if parsed.scheme and len(parsed.scheme) > 1:  # one letter: a Windows drive
        raise InvalidStoreUrl(f"{url}: unknown store scheme {parsed.scheme!r} "
                              "(use a path, file:///PATH or s3://BUCKET/PREFIX)")
    return LocalStore(Path(url), progress=progress)
