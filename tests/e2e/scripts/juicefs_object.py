#!/usr/bin/env python3
"""JuiceFS's object format written from its description, apart from jfs's code.

A block is compressed (LZ4 block, no size; zstd frame, level 1) and then,
on an encrypted volume, sealed: 2 bytes big-endian wrapped-key length, 1
byte nonce length, the 32-byte data key wrapped with RSA-OAEP (SHA-256,
MGF1-SHA-256, label b"keys"), a 12-byte nonce, and AES-256-GCM or
ChaCha20-Poly1305 ciphertext with its 16-byte tag (no associated data).
Uses liblz4, libzstd and OpenSSL through Python bindings.

usage: juicefs_object.py seal PEM ALGO COMPRESSION IN OUT
       juicefs_object.py open PEM COMPRESSION LEN IN OUT
PEM "-": not sealed; the key's passphrase comes from JFS_RSA_PASSPHRASE.
"""
import os
import struct
import sys

import lz4.block
import zstandard
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

OAEP = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=b"keys")
CIPHERS = {"aes256gcm-rsa": AESGCM, "": AESGCM, "chacha20-rsa": ChaCha20Poly1305}


def private_key(path):
    with open(path, "rb") as f:
        pem = f.read()
    passphrase = os.environ.get("JFS_RSA_PASSPHRASE") if b"ENCRYPTED" in pem else None
    return serialization.load_pem_private_key(pem, password=passphrase.encode() if passphrase else None)


def compress(kind, data):
    kind = kind.lower()
    if kind == "lz4":
        return lz4.block.compress(data, store_size=False)
    if kind == "zstd":
        return zstandard.ZstdCompressor(level=1).compress(data)
    return data


def decompress(kind, data, size):
    kind = kind.lower()
    if kind == "lz4":
        out = lz4.block.decompress(data, uncompressed_size=size)
    elif kind == "zstd":
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    else:
        out = data
    assert len(out) == size, f"{len(out)} bytes, not {size}"
    return out


def seal(key, algo, data):
    data_key, nonce = os.urandom(32), os.urandom(12)
    wrapped = key.public_key().encrypt(data_key, OAEP)
    sealed = CIPHERS[algo](data_key).encrypt(nonce, data, None)
    return struct.pack(">HB", len(wrapped), len(nonce)) + wrapped + nonce + sealed


def unseal(key, stored):
    key_len, nonce_len = struct.unpack(">HB", stored[:3])
    wrapped = stored[3:3 + key_len]
    nonce = stored[3 + key_len:3 + key_len + nonce_len]
    data_key = key.decrypt(wrapped, OAEP)
    for cipher in (AESGCM, ChaCha20Poly1305):
        try:
            return cipher(data_key).decrypt(nonce, stored[3 + key_len + nonce_len:], None)
        except Exception:
            continue
    raise ValueError("the tag matches under neither cipher")


def main(argv):
    if argv[1] == "seal":
        pem, algo, kind, src, dst = argv[2:7]
        data = compress(kind, open(src, "rb").read())
        if pem != "-":
            data = seal(private_key(pem), algo, data)
        open(dst, "wb").write(data)
    elif argv[1] == "open":
        pem, kind, size, src, dst = argv[2:7]
        data = open(src, "rb").read()
        if pem != "-":
            data = unseal(private_key(pem), data)
        open(dst, "wb").write(decompress(kind, data, int(size)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
