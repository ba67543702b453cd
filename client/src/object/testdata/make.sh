#!/usr/bin/env bash
# Makes the test vectors of ../codec.rs with tests/e2e/scripts/juicefs_object.py
# (JuiceFS's object format written apart from jfs, on liblz4, libzstd and
# OpenSSL): plain.txt compressed (lz4.bin, zstd.bin), sealed
# (sealed-aes.bin), and both with the passphrase-protected key
# (sealed-chacha-zstd.bin). The keys were made by `openssl genrsa` (with
# `-aes256 -passout pass:jfs-test-passphrase` for rsa2048-encrypted.pem,
# and `openssl rsa -traditional` for the PKCS#1 copy). Test keys only.
set -euo pipefail
cd "$(dirname "$0")"
PY=${JFS_VENV:-/opt/jfs-test-venv}/bin/python
S=../../../../tests/e2e/scripts/juicefs_object.py
"$PY" - > plain.txt <<'PY'
import hashlib, sys
text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(600))
noise, seed = b"", b"jfs"
while len(noise) < 4096:
    seed = hashlib.sha256(seed).digest()
    noise += seed
sys.stdout.buffer.write(text.encode() + noise[:4096])
PY
"$PY" "$S" seal - "" lz4 plain.txt lz4.bin
"$PY" "$S" seal - "" zstd plain.txt zstd.bin
"$PY" "$S" seal rsa2048.pem aes256gcm-rsa none plain.txt sealed-aes.bin
JFS_RSA_PASSPHRASE=jfs-test-passphrase "$PY" "$S" seal rsa2048-encrypted.pem chacha20-rsa zstd \
  plain.txt sealed-chacha-zstd.bin
# rsa2048.pem as JuiceFS keeps it in its format with KeyEncrypted (uuid
# d4f6a5c2-3b1e-4c8f-9a7d-2e5b8c1f0a93): AES-128-GCM under the MD5 of the
# uuid, base64 of the nonce and the sealed text
"$PY" - > rsa2048.pem.juicefs-obfuscated <<'PY'
import base64, hashlib, os
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
uuid = "d4f6a5c2-3b1e-4c8f-9a7d-2e5b8c1f0a93"
pem = open("rsa2048.pem", "rb").read()
nonce = os.urandom(12)
print(base64.b64encode(nonce + AESGCM(hashlib.md5(uuid.encode()).digest()).encrypt(nonce, pem, None)).decode())
PY
# (the legacy encrypted copies were made by `openssl rsa -in rsa2048.pem
# -aes256|-aes128 -traditional -passout pass:jfs-test-passphrase`)
