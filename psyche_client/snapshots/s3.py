"""The snapshot store in an S3-compatible bucket, through boto3.

Uploads go through boto3's managed transfer: files larger than `part_size` are sent as a
multipart upload of `part_size` parts, `concurrency` at a time. Downloads are one ranged GET
per blob, appended to a `.part` file, so an interrupted get continues where it stopped. Reads
can be anonymous (unsigned requests against a bucket whose policy allows public read); writes
need the checkpointer's credentials."""

import contextlib
import json
import os
from dataclasses import dataclass

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import HTTPError

from .errors import (
    InvalidStoreUrl,
    SnapshotNotFound,
    SnapshotStoreError,
    StoreAccessDenied,
    StoreUnreachable,
)
from .manifest import is_location
from .store import SnapshotStore

DEFAULT_PART_SIZE = 16 << 20
DEFAULT_CONCURRENCY = 4
READ_CHUNK = 1 << 20
DENIED = {"AccessDenied", "403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch",
          "AllAccessDisabled"}
MISSING = {"NoSuchKey", "404", "NotFound"}


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def __repr__(self):  # never print the secret
        return f"Credentials(access_key={self.access_key!r}, secret_key=***)"


def credentials_from_env(env=None):
    """PSYCHE_S3_ACCESS_KEY / PSYCHE_S3_SECRET_KEY, else AWS_ACCESS_KEY_ID /
    AWS_SECRET_ACCESS_KEY; None (anonymous: reads only) when neither pair is set."""
    env = os.environ if env is None else env
    for a, s in (("PSYCHE_S3_ACCESS_KEY", "PSYCHE_S3_SECRET_KEY"),
                 ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")):
        if env.get(a) and env.get(s):
            return Credentials(env[a], env[s])
    return None


def as_credentials(value):
    if value is None or isinstance(value, Credentials):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return Credentials(*value)
    if isinstance(value, dict):
        return Credentials(value["access_key"], value["secret_key"])
    raise SnapshotStoreError("credentials must be Credentials, (access_key, secret_key) or "
                             "{access_key, secret_key}")


def public_read_policy(bucket: str) -> str:
    """Anyone may list and read; only the credentials' owner writes."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "PublicRead", "Effect": "Allow", "Principal": "*",
        "Action": ["s3:GetObject", "s3:ListBucket"],
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]})


class S3Store(SnapshotStore):
    def __init__(self, bucket: str, prefix: str = "", endpoint: str | None = None,
                 credentials=None, progress: bool = True, part_size: int = DEFAULT_PART_SIZE,
                 concurrency: int = DEFAULT_CONCURRENCY, region: str = "us-east-1"):
        super().__init__()
        if not bucket:
            raise InvalidStoreUrl("an S3 store needs a bucket: s3://BUCKET[/PREFIX]")
        if part_size < 5 << 20:
            raise SnapshotStoreError("part_size must be at least 5 MiB (S3's smallest part)")
        if concurrency < 1:
            raise SnapshotStoreError("concurrency must be at least 1")
        self.bucket, self.endpoint, self.progress = bucket, endpoint, progress
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.credentials = as_credentials(credentials)
        self.part_size, self.concurrency = part_size, concurrency
        # no SHA-256 of each request body for its signature (botocore does it on plain http),
        # and no CRC32 trailer on every upload (botocore's default since 1.36; "when_required"
        # is its documented way back to the older behaviour): the content is guarded end to end
        # by SHA-256 instead, the put hashing each file as it sends it and every get checking
        # every blob, and in transit by TLS on an https endpoint. On a 2-core machine the CRC32
        # cost a fifth of the upload's throughput (benchmarks/snapshot.py).
        config = Config(region_name=region, request_checksum_calculation="when_required",
                        s3={"addressing_style": "path", "payload_signing_enabled": False},
                        retries={"max_attempts": 3, "mode": "standard"},
                        connect_timeout=10, read_timeout=60,
                        max_pool_connections=max(10, concurrency + 2),
                        **({} if self.credentials else {"signature_version": UNSIGNED}))
        keys = ({"aws_access_key_id": self.credentials.access_key,
                 "aws_secret_access_key": self.credentials.secret_key}
                if self.credentials else {})
        self.client = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config,
                                                     **keys)
        self.transfer = TransferConfig(multipart_threshold=part_size,
                                       multipart_chunksize=part_size,
                                       max_concurrency=concurrency, use_threads=True)

    def describe(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"s3://{self.bucket}/{self.prefix}{where}"

    def _blob_key(self, sha256):
        return f"{self.prefix}blobs/{sha256}"

    def _manifest_key(self, location):
        return f"{self.prefix}manifests/{location}.json"

    @contextlib.contextmanager
    def _errors(self, what: str, missing: str | None = None):
        """Turns boto3's exceptions into the store's named errors."""
        try:
            yield
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code == "NoSuchBucket":
                raise SnapshotNotFound(f"{what}: the bucket {self.bucket} does not exist"
                                       f"{' at ' + self.endpoint if self.endpoint else ''}") \
                    from None
            if code in MISSING and missing:
                raise SnapshotNotFound(missing) from None
            if code in DENIED:
                raise StoreAccessDenied(self._denied(what)) from None
            raise SnapshotStoreError(f"{what}: {code} "
                                     f"{e.response.get('Error', {}).get('Message', '')}") from None
        except S3UploadFailedError as e:
            if any(code in str(e) for code in DENIED):
                raise StoreAccessDenied(self._denied(what)) from None
            raise SnapshotStoreError(f"{what}: {e}") from None
        except NoCredentialsError:
            raise StoreAccessDenied(self._denied(what)) from None
        except (BotoConnectionError, HTTPError) as e:
            raise StoreUnreachable(f"{what}: cannot reach {self.describe()} ({e}); a get can be "
                                   "run again and continues where it stopped") from None
        except BotoCoreError as e:
            raise SnapshotStoreError(f"{what}: {e}") from None

    def _denied(self, what):
        if self.credentials is None:
            return (f"{what}: {self.describe()} refused an anonymous request; writing needs "
                    "the checkpointer's credentials (PSYCHE_S3_ACCESS_KEY/PSYCHE_S3_SECRET_KEY)")
        return (f"{what}: {self.describe()} refused the credentials of access key "
                f"{self.credentials.access_key}")

    def _exists(self, key, what):
        with self._errors(what):
            try:
                self.client.head_object(Bucket=self.bucket, Key=key)
                return True
            except ClientError as e:
                if str(e.response.get("Error", {}).get("Code", "")) in MISSING:
                    return False
                raise

    def _has_blob(self, sha256):
        return self._exists(self._blob_key(sha256), f"checking blob {sha256[:16]}")

    def _upload_blob(self, sha256, path, size, advance):
        with self._errors(f"uploading {path.name} to {self.describe()}"):
            self.client.upload_file(str(path), self.bucket, self._blob_key(sha256),
                                    Config=self.transfer, Callback=advance)

    def _has_manifest(self, location):
        return self._exists(self._manifest_key(location), f"checking snapshot {location[:16]}")

    def _put_manifest(self, location, data):
        with self._errors(f"uploading the manifest to {self.describe()}"):
            self.client.put_object(Bucket=self.bucket, Key=self._manifest_key(location),
                                   Body=data, ContentType="application/json")

    def _read_manifest(self, location):
        with self._errors(f"reading snapshot {location}",
                          missing=f"no snapshot {location} in {self.describe()}"):
            return self.client.get_object(Bucket=self.bucket,
                                          Key=self._manifest_key(location))["Body"].read()

    def _list_keys(self, under):
        keys = []
        with self._errors(f"listing {self.describe()}"):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + under)
            for page in pages:
                keys += [o["Key"][len(self.prefix + under):] for o in page.get("Contents", [])]
        return keys

    def _manifest_locations(self):
        return sorted(k[:-5] for k in self._list_keys("manifests/")
                      if k.endswith(".json") and is_location(k[:-5]))

    def _blob_locations(self):
        return sorted(k for k in self._list_keys("blobs/") if is_location(k))

    def _stream_blob(self, sha256, offset, write):
        extra = {"Range": f"bytes={offset}-"} if offset else {}
        with self._errors(f"downloading blob {sha256[:16]} from {self.describe()}",
                          missing=f"blob {sha256} is missing from {self.describe()}"):
            body = self.client.get_object(Bucket=self.bucket, Key=self._blob_key(sha256),
                                          **extra)["Body"]
            with contextlib.closing(body):
                for chunk in body.iter_chunks(READ_CHUNK):
                    write(chunk)

    def _delete_manifest(self, location):
        with self._errors(f"deleting snapshot {location[:16]}"):
            self.client.delete_object(Bucket=self.bucket, Key=self._manifest_key(location))

    def _delete_blob(self, sha256):
        with self._errors(f"deleting blob {sha256[:16]}"):
            self.client.delete_object(Bucket=self.bucket, Key=self._blob_key(sha256))

    def create_bucket(self, public_read: bool = True):
        """Creates the bucket (kept if this account already owns it); with public_read, its
        policy lets anyone list and read while writes still need credentials."""
        with self._errors(f"creating the bucket {self.bucket}"):
            try:
                self.client.create_bucket(Bucket=self.bucket)
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                    raise
            if public_read:
                self.client.put_bucket_policy(Bucket=self.bucket,
                                              Policy=public_read_policy(self.bucket))
