"""Dynamic password configs encrypted at rest: Kafka's ``PasswordEncoder``.

A password-type broker config set with AlterConfigs (``sasl.jaas.config``, a listener's
``ssl.keystore.password``, ...) is stored in the metadata image, which reaches a file on disk
(or etcd). As Kafka's brokers do, the value is encrypted before it is stored, with a key
derived from ``password.encoder.secret`` (a static config, never stored). The encoded form is
Kafka's: a comma-separated ``key:value`` map naming how it was made, so a value stays
readable after the defaults change::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,
    keyLength:128,iterations:4096,salt:<base64>,iv:<base64>,passwordLength:<n>,
    encryptedPassword:<base64>

The key is PBKDF2(secret, a fresh 256-byte salt, iterations) of ``keyLength`` bits; the
cipher is AES in CBC mode with PKCS#7 padding (Kafka's default) or AES-GCM
(``password.encoder.cipher.algorithm=AES/GCM/NoPadding``, whose tag also detects tampering;
``authenticationTagLength`` is then in the map). ``decode`` raises ``PasswordDecodeError``
when the secret is wrong or the value damaged, never returning garbage silently: a CBC value
must unpad and match its recorded length, a GCM value must verify.

The cipher comes from the ``cryptography`` library; nothing here implements one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

CBC = "AES/CBC/PKCS5Padding"
GCM = "AES/GCM/NoPadding"
CIPHER_ALGORITHMS = (CBC, GCM)
#: Kafka's key factories (PBKDF2WithHmacSHA512 is its default) -> hashlib's name.
KEY_FACTORIES = {
    "PBKDF2WithHmacSHA512": "sha512",
    "PBKDF2WithHmacSHA256": "sha256",
    "PBKDF2WithHmacSHA1": "sha1",
}
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
KEY_LENGTHS = (128, 192, 256)
MIN_ITERATIONS = 1024
_GCM_TAG_BITS = 128


class PasswordDecodeError(ValueError):
    """An encoded password that this encoder cannot decode (other secret, or damaged)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise PasswordDecodeError("not base64") from None


class PasswordEncoder:
    """Encrypts and decrypts dynamic password configs with ``secret`` (see the module)."""

    def __init__(
        self,
        secret: str,
        key_factory: str | None = None,
        cipher: str = CBC,
        key_length: int = 128,
        iterations: int = 4096,
    ) -> None:
        key_factory = key_factory or DEFAULT_KEY_FACTORY
        if not secret:
            raise ValueError("password.encoder.secret is empty")
        if key_factory not in KEY_FACTORIES:
            raise ValueError(
                f"password.encoder.keyfactory.algorithm={key_factory} is not one of {', '.join(KEY_FACTORIES)}"
            )
        if cipher not in CIPHER_ALGORITHMS:
            raise ValueError(
                f"password.encoder.cipher.algorithm={cipher} is not one of {', '.join(CIPHER_ALGORITHMS)}"
            )
        if key_length not in KEY_LENGTHS:
            raise ValueError(
                f"password.encoder.key.length={key_length} is not an AES key length (128, 192 or 256)"
            )
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"password.encoder.iterations={iterations} is below {MIN_ITERATIONS}")
        self._secret = secret.encode()
        self.key_factory = key_factory
        self.cipher = cipher
        self.key_length = key_length
        self.iterations = iterations

    def __repr__(self) -> str:  # never the secret
        return f"PasswordEncoder({self.key_factory}, {self.cipher}, {self.key_length}, {self.iterations})"

    def _key(self, factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        return hashlib.pbkdf2_hmac(
            KEY_FACTORIES[factory], self._secret, salt, iterations, key_length // 8
        )

    def encode(self, password: str) -> str:
        salt = os.urandom(256)
        key = self._key(self.key_factory, salt, self.iterations, self.key_length)
        plain = password.encode()
        fields = {
            "keyFactoryAlgorithm": self.key_factory,
            "cipherAlgorithm": self.cipher,
            "keyLength": str(self.key_length),
            "iterations": str(self.iterations),
            "salt": _b64(salt),
        }
        if self.cipher == GCM:
            iv = os.urandom(12)
            encrypted = AESGCM(key).encrypt(iv, plain, None)
            fields["authenticationTagLength"] = str(_GCM_TAG_BITS)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            padded = padder.update(plain) + padder.finalize()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padded) + encryptor.finalize()
        fields["initializationVector"] = _b64(iv)
        fields["passwordLength"] = str(len(password))
        fields["encryptedPassword"] = _b64(encrypted)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            fields = dict(part.split(":", 1) for part in encoded.split(","))
            factory, cipher = fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"]
            key_length, iterations = int(fields["keyLength"]), int(fields["iterations"])
            length = int(fields["passwordLength"])
            salt, iv = _unb64(fields["salt"]), _unb64(fields["initializationVector"])
            encrypted = _unb64(fields["encryptedPassword"])
        except (KeyError, ValueError):
            raise PasswordDecodeError("not an encoded password") from None
        if (
            factory not in KEY_FACTORIES
            or key_length not in KEY_LENGTHS
            or cipher not in CIPHER_ALGORITHMS
        ):
            raise PasswordDecodeError(f"unsupported encoding {factory}/{cipher}/{key_length}")
        key = self._key(factory, salt, iterations, key_length)
        try:
            if cipher == GCM:
                plain = AESGCM(key).decrypt(iv, encrypted, None)
            else:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                padded = decryptor.update(encrypted) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(padded) + unpadder.finalize()
            password = plain.decode()
        except (InvalidTag, ValueError, UnicodeDecodeError):
            raise PasswordDecodeError("Password could not be decoded") from None
        if len(password) != length:
            raise PasswordDecodeError(
                "Password could not be decoded, sanity check of length failed"
            )
        return password


def looks_encoded(value: str) -> bool:
    """True for a value in the encoder's stored form."""
    return value.startswith("keyFactoryAlgorithm:") and ",encryptedPassword:" in value
