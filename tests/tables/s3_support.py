"""An S3-compatible store for the table tests: moto's server mode on 127.0.0.1 (a real HTTP
server speaking S3 and IAM, in a thread of the test process), with credentials enforced: an IAM
user's access key may write, a wrong secret is refused (SignatureDoesNotMatch), a bucket that
does not exist is refused (NoSuchBucket).

moto checks credentials once its first ``INITIAL_NO_AUTH_ACTION_COUNT`` requests are served
(``POST /moto-api/reset-auth`` sets the count): the three IAM calls that make the user, its
policy and its key go unchecked, every request after them is checked."""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyarrow import fs

REGION = "us-east-1"
#: The IAM requests before credentials are checked: create_user, put_user_policy,
#: create_access_key.
SETUP_REQUESTS = 3


@dataclass(frozen=True)
class S3Store:
    endpoint: str
    access_key: str
    secret_key: str

    def filesystem(self, secret_key: str | None = None) -> fs.S3FileSystem:
        return fs.S3FileSystem(
            endpoint_override=self.endpoint,
            region=REGION,
            access_key=self.access_key,
            secret_key=secret_key or self.secret_key,
            allow_bucket_creation=True,
        )

    def new_bucket(self) -> str:
        name = f"lake-{uuid.uuid4().hex[:12]}"
        self.filesystem().create_dir(name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object in ``bucket``, as ``s3://bucket/key``."""
        infos = self.filesystem().get_file_info(fs.FileSelector(bucket, recursive=True))
        return sorted(f"s3://{i.path}" for i in infos if i.type == fs.FileType.File)

    def broker_props(self, warehouse: str, secret_key: str | None = None) -> dict[str, str]:
        """The broker configs of a warehouse in this store."""
        return {
            "iceberg.warehouse": warehouse,
            "iceberg.s3.endpoint": self.endpoint,
            "iceberg.s3.region": REGION,
            "iceberg.s3.path-style-access": "true",
            "iceberg.s3.access-key-id": self.access_key,
            "iceberg.s3.secret-access-key": secret_key or self.secret_key,
        }


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(req, timeout=30) as answer:
        assert answer.status == 200, answer.read()


@contextmanager
def moto_s3() -> Iterator[S3Store]:
    """A moto S3 server on a free port of 127.0.0.1 and an IAM user allowed ``s3:*``."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        _post(f"{endpoint}/moto-api/reset-auth", str(SETUP_REQUESTS).encode())
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        user = f"gregor-{uuid.uuid4().hex[:8]}"  # moto's backends outlive one server
        iam.create_user(UserName=user)
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        yield S3Store(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        try:
            _post(f"{endpoint}/moto-api/reset-auth", b"inf")  # moto's settings are global
        finally:
            server.stop()
