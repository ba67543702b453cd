//! How JuiceFS stores a block when its volume compresses or encrypts: compressed (an LZ4 block, a zstd frame), then sealed with a key of the object's own.
//!
//! A sealed object is, in order: the wrapped key's length (2 bytes, big
//! endian), the nonce's length (1 byte), the object's 32-byte data key
//! wrapped by the volume's RSA key (RSA-OAEP, SHA-256, label "keys"), the
//! nonce (12 bytes), and the data sealed with AES-256-GCM or
//! ChaCha20-Poly1305 (ciphertext, then the 16-byte tag; no associated data).
//! A compressed block carries no length: the block's key ends with it.
//! The cryptography is RustCrypto's; nothing here is hand-made but the
//! layout.
use std::io;

use aes_gcm::aead::{Aead, KeyInit};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

/// JuiceFS's zstd level (its fastest).
const ZSTD_LEVEL: i32 = 1;

/// The OAEP label JuiceFS wraps data keys with.
const OAEP_LABEL: &str = "keys";

/// Bytes of a data key (AES-256, ChaCha20).
const DATA_KEY_LEN: usize = 32;

/// Bytes of a nonce (both ciphers).
const NONCE_LEN: usize = 12;

/// Bytes of an authentication tag (both ciphers).
const TAG_LEN: usize = 16;

/// How blocks are compressed (`setting.compression`, JuiceFS's `--compress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

impl Compression {
    /// The setting's value, in any case (JuiceFS keeps it as typed).
    pub fn parse(name: &str) -> anyhow::Result<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            other => anyhow::bail!("unknown compression {other:?}: use none, lz4 or zstd"),
        }
    }

    /// The most a block of `len` bytes takes compressed.
    pub fn bound(self, len: usize) -> usize {
        match self {
            Compression::None => len,
            Compression::Lz4 => lz4_flex::block::get_maximum_output_size(len),
            Compression::Zstd => zstd::zstd_safe::compress_bound(len),
        }
    }

    pub fn compress(self, data: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            Compression::None => Ok(data.to_vec()),
            Compression::Lz4 => Ok(lz4_flex::block::compress(data)),
            Compression::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL),
        }
    }

    /// The block of exactly `len` bytes that `stored` holds compressed.
    pub fn decompress(self, stored: &[u8], len: usize) -> io::Result<Vec<u8>> {
        let out = match self {
            Compression::None => stored.to_vec(),
            Compression::Lz4 => {
                let mut out = vec![0u8; len];
                let n = lz4_flex::block::decompress_into(stored, &mut out)
                    .map_err(|e| corrupt(format!("lz4: {e}")))?;
                out.truncate(n);
                out
            }
            Compression::Zstd => zstd::bulk::decompress(stored, len)?,
        };
        if out.len() != len {
            return Err(corrupt(format!(
                "it holds {} bytes, its key says {len}",
                out.len()
            )));
        }
        Ok(out)
    }
}

fn corrupt(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// The data cipher (`setting.encrypt_algo`, JuiceFS's `--encrypt-algo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl Cipher {
    pub fn parse(name: &str) -> anyhow::Result<Cipher> {
        match name {
            "" | "aes256gcm-rsa" => Ok(Cipher::Aes256Gcm),
            "chacha20-rsa" => Ok(Cipher::ChaCha20Poly1305),
            other => {
                anyhow::bail!("unknown encryption {other:?}: use aes256gcm-rsa or chacha20-rsa")
            }
        }
    }

    fn seal(self, key: &[u8], nonce: &[u8], data: &[u8]) -> Vec<u8> {
        let sealed = match self {
            Cipher::Aes256Gcm => aes_gcm::Aes256Gcm::new_from_slice(key)
                .expect("a 32-byte key")
                .encrypt(nonce.into(), data),
            Cipher::ChaCha20Poly1305 => chacha20poly1305::ChaCha20Poly1305::new_from_slice(key)
                .expect("a 32-byte key")
                .encrypt(nonce.into(), data),
        };
        sealed.expect("sealing never fails for a block-sized input")
    }

    fn open(self, key: &[u8], nonce: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if key.len() != DATA_KEY_LEN || nonce.len() != NONCE_LEN {
            return None;
        }
        match self {
            Cipher::Aes256Gcm => aes_gcm::Aes256Gcm::new_from_slice(key)
                .ok()?
                .decrypt(nonce.into(), sealed)
                .ok(),
            Cipher::ChaCha20Poly1305 => chacha20poly1305::ChaCha20Poly1305::new_from_slice(key)
                .ok()?
                .decrypt(nonce.into(), sealed)
                .ok(),
        }
    }
}

/// Seals and opens objects with a volume's RSA key.
#[derive(Clone)]
pub struct Sealer {
    private: RsaPrivateKey,
    public: RsaPublicKey,
    cipher: Cipher,
}

impl Sealer {
    /// From the volume's key (PEM: PKCS#1 or PKCS#8, the latter possibly
    /// encrypted with `passphrase`) and its algorithm.
    pub fn new(pem: &str, passphrase: Option<&str>, algo: &str) -> anyhow::Result<Sealer> {
        let cipher = Cipher::parse(algo)?;
        let private = parse_private_key(pem, passphrase)?;
        let public = RsaPublicKey::from(&private);
        Ok(Sealer {
            private,
            public,
            cipher,
        })
    }

    /// A key for sealing the mount's disk cache, derived from the volume's
    /// RSA key (the same on every mount of it, so a cache outlives a
    /// remount, and useless without the RSA key).
    pub fn cache_key(&self) -> [u8; 32] {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use sha2::Digest;
        let der = self
            .private
            .to_pkcs1_der()
            .expect("a parsed RSA key encodes");
        let mut h = sha2::Sha256::new();
        h.update(b"jfs disk cache key v1\0");
        h.update(der.as_bytes());
        h.finalize().into()
    }

    /// The bytes sealing adds to an object.
    pub fn overhead(&self) -> usize {
        3 + rsa::traits::PublicKeyParts::size(&self.public) + NONCE_LEN + TAG_LEN
    }

    pub fn seal(&self, data: &[u8]) -> io::Result<Vec<u8>> {
        use rand::RngCore;
        let mut rng = rand::rngs::OsRng;
        let mut key = [0u8; DATA_KEY_LEN];
        rng.fill_bytes(&mut key);
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let wrapped = self
            .public
            .encrypt(
                &mut rng,
                Oaep::new_with_label::<sha2::Sha256, _>(OAEP_LABEL),
                &key,
            )
            .map_err(|e| io::Error::other(format!("wrapping the object's key: {e}")))?;
        let sealed = self.cipher.seal(&key, &nonce, data);
        let mut out = Vec::with_capacity(3 + wrapped.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(&(wrapped.len() as u16).to_be_bytes());
        out.push(NONCE_LEN as u8);
        out.extend_from_slice(&wrapped);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The data `stored` seals; InvalidData when it is not an object this
    /// key sealed, or it was changed since.
    pub fn open(&self, stored: &[u8]) -> io::Result<Vec<u8>> {
        if stored.len() < 3 {
            return Err(corrupt("too short to be sealed".into()));
        }
        let key_len = u16::from_be_bytes([stored[0], stored[1]]) as usize;
        let nonce_len = stored[2] as usize;
        if 3 + key_len + nonce_len >= stored.len() {
            return Err(corrupt("too short for its header".into()));
        }
        let wrapped = &stored[3..3 + key_len];
        let nonce = &stored[3 + key_len..3 + key_len + nonce_len];
        let sealed = &stored[3 + key_len + nonce_len..];
        let key = self
            .private
            .decrypt(Oaep::new_with_label::<sha2::Sha256, _>(OAEP_LABEL), wrapped)
            .map_err(|_| {
                corrupt(
                    "its key does not unwrap with the volume's RSA key (another key sealed it)"
                        .into(),
                )
            })?;
        self.cipher
            .open(&key, nonce, sealed)
            .ok_or_else(|| corrupt("its authentication tag does not match: it was changed".into()))
    }
}

/// An RSA private key from PEM: PKCS#1 (`RSA PRIVATE KEY`), PKCS#8
/// (`PRIVATE KEY`), PKCS#8 encrypted with a passphrase (`ENCRYPTED
/// PRIVATE KEY`, what OpenSSL 3's `genrsa -aes256` writes), or PKCS#1 in
/// OpenSSL's legacy encrypted form (what OpenSSL 1.x's wrote, and JuiceFS
/// reads with Go's `x509.DecryptPEMBlock`).
fn parse_private_key(pem: &str, passphrase: Option<&str>) -> anyhow::Result<RsaPrivateKey> {
    let pem = pem.trim();
    if pem.contains("BEGIN ENCRYPTED PRIVATE KEY") {
        let Some(passphrase) = passphrase.filter(|p| !p.is_empty()) else {
            anyhow::bail!(
                "the volume's RSA key is protected by a passphrase: set JFS_RSA_PASSPHRASE"
            );
        };
        return RsaPrivateKey::from_pkcs8_encrypted_pem(pem, passphrase.as_bytes()).map_err(|e| {
            anyhow::anyhow!("the volume's RSA key does not open with JFS_RSA_PASSPHRASE ({e}): wrong passphrase?")
        });
    }
    if pem.contains("Proc-Type: 4,ENCRYPTED") {
        let Some(passphrase) = passphrase.filter(|p| !p.is_empty()) else {
            anyhow::bail!(
                "the volume's RSA key is protected by a passphrase: set JFS_RSA_PASSPHRASE"
            );
        };
        return legacy_encrypted_pem(pem, passphrase.as_bytes());
    }
    if pem.contains("BEGIN RSA PRIVATE KEY") {
        return RsaPrivateKey::from_pkcs1_pem(pem)
            .map_err(|e| anyhow::anyhow!("the volume's RSA key (PKCS#1 PEM) is unreadable: {e}"));
    }
    RsaPrivateKey::from_pkcs8_pem(pem).map_err(|e| {
        anyhow::anyhow!(
            "the volume's RSA key is unreadable ({e}): give an RSA private key in PEM \
             (openssl genrsa -aes256 -out key.pem 2048)"
        )
    })
}

/// A PKCS#1 key in OpenSSL's legacy encrypted PEM form: headers
/// `Proc-Type: 4,ENCRYPTED` and `DEK-Info: CIPHER,IV`, the body encrypted
/// in CBC mode (PKCS#7 padding) under a key derived from the passphrase as
/// OpenSSL's `EVP_BytesToKey` does (MD5, one round, the IV's first 8 bytes
/// as salt).
fn legacy_encrypted_pem(pem: &str, passphrase: &[u8]) -> anyhow::Result<RsaPrivateKey> {
    use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
    use base64::Engine;
    let mut dek_info = None;
    let mut body = String::new();
    for line in pem.lines().map(str::trim) {
        if line.starts_with("-----") || line.is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some(("DEK-Info", value)) => dek_info = Some(value.trim().to_string()),
            Some(_) => {}
            None => body.push_str(line),
        }
    }
    let unreadable =
        |why: &str| anyhow::anyhow!("the volume's RSA key (legacy encrypted PEM): {why}");
    let dek_info = dek_info.ok_or_else(|| unreadable("no DEK-Info header"))?;
    let (cipher, iv_hex) = dek_info
        .split_once(',')
        .ok_or_else(|| unreadable("a DEK-Info header without an IV"))?;
    let iv = (0..iv_hex.len())
        .step_by(2)
        .map(|i| {
            iv_hex
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .filter(|iv| iv.len() >= 8)
        .ok_or_else(|| unreadable("its IV is not hexadecimal"))?;
    let sealed = base64::engine::general_purpose::STANDARD
        .decode(&body)
        .map_err(|e| unreadable(&format!("its body is not base64 ({e})")))?;
    let key_len = match cipher {
        "AES-128-CBC" => 16,
        "AES-192-CBC" | "DES-EDE3-CBC" => 24,
        "AES-256-CBC" => 32,
        other => {
            return Err(unreadable(&format!(
                "cipher {other} is not read (AES-128/192/256-CBC and DES-EDE3-CBC are)"
            )))
        }
    };
    let key = evp_bytes_to_key(passphrase, &iv[..8], key_len);
    let opened = match cipher {
        "AES-128-CBC" => cbc::Decryptor::<aes::Aes128>::new_from_slices(&key, &iv)
            .map(|d| d.decrypt_padded_vec_mut::<Pkcs7>(&sealed)),
        "AES-192-CBC" => cbc::Decryptor::<aes::Aes192>::new_from_slices(&key, &iv)
            .map(|d| d.decrypt_padded_vec_mut::<Pkcs7>(&sealed)),
        "AES-256-CBC" => cbc::Decryptor::<aes::Aes256>::new_from_slices(&key, &iv)
            .map(|d| d.decrypt_padded_vec_mut::<Pkcs7>(&sealed)),
        _ => cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
            .map(|d| d.decrypt_padded_vec_mut::<Pkcs7>(&sealed)),
    };
    let wrong = || {
        anyhow::anyhow!(
            "the volume's RSA key does not open with JFS_RSA_PASSPHRASE: wrong passphrase?"
        )
    };
    let der = opened
        .map_err(|_| unreadable("its IV has the wrong length"))?
        .map_err(|_| wrong())?;
    RsaPrivateKey::from_pkcs1_der(&der).map_err(|_| wrong())
}

/// OpenSSL's `EVP_BytesToKey` with MD5 and one round: D1 = MD5(pass, salt),
/// Dn = MD5(Dn-1, pass, salt), concatenated to `len` bytes.
fn evp_bytes_to_key(passphrase: &[u8], salt: &[u8], len: usize) -> Vec<u8> {
    use md5::Digest;
    let mut out = Vec::with_capacity(len + 16);
    let mut previous: Vec<u8> = Vec::new();
    while out.len() < len {
        let mut h = md5::Md5::new();
        h.update(&previous);
        h.update(passphrase);
        h.update(salt);
        previous = h.finalize().to_vec();
        out.extend_from_slice(&previous);
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // made apart from this code (testdata/make.sh: liblz4, libzstd, OpenSSL)
    const PLAIN: &[u8] = include_bytes!("testdata/plain.txt");
    const LZ4: &[u8] = include_bytes!("testdata/lz4.bin");
    const ZSTD: &[u8] = include_bytes!("testdata/zstd.bin");
    const SEALED_AES: &[u8] = include_bytes!("testdata/sealed-aes.bin");
    const SEALED_CHACHA_ZSTD: &[u8] = include_bytes!("testdata/sealed-chacha-zstd.bin");
    const KEY: &str = include_str!("testdata/rsa2048.pem");
    const KEY_PKCS1: &str = include_str!("testdata/rsa2048-pkcs1.pem");
    const KEY_ENCRYPTED: &str = include_str!("testdata/rsa2048-encrypted.pem");
    const OTHER_KEY: &str = include_str!("testdata/other2048.pem");
    const KEY_LEGACY_AES256: &str = include_str!("testdata/rsa2048-legacy-aes256.pem");
    const KEY_LEGACY_AES128: &str = include_str!("testdata/rsa2048-legacy-aes128.pem");
    const PASSPHRASE: &str = "jfs-test-passphrase";

    #[test]
    fn blocks_compressed_elsewhere_decompress_to_their_bytes() {
        assert_eq!(
            Compression::Lz4.decompress(LZ4, PLAIN.len()).unwrap(),
            PLAIN
        );
        assert_eq!(
            Compression::Zstd.decompress(ZSTD, PLAIN.len()).unwrap(),
            PLAIN
        );
        // a length that is not the block's is refused, not padded or cut
        for c in [Compression::Lz4, Compression::Zstd] {
            let stored = if c == Compression::Lz4 { LZ4 } else { ZSTD };
            let e = c.decompress(stored, PLAIN.len() + 1).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{c:?}: {e}");
        }
        assert!(Compression::Lz4
            .decompress(&LZ4[..LZ4.len() / 2], PLAIN.len())
            .is_err());
    }

    #[test]
    fn compression_round_trips_within_its_bound() {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for data in [PLAIN, &PLAIN[PLAIN.len() - 4096..], b"x".as_slice()] {
                let stored = c.compress(data).unwrap();
                assert!(stored.len() <= c.bound(data.len()), "{c:?}");
                assert_eq!(c.decompress(&stored, data.len()).unwrap(), data, "{c:?}");
            }
        }
        assert!(Compression::Lz4.compress(PLAIN).unwrap().len() < PLAIN.len() / 3);
        assert_eq!(Compression::parse("LZ4").unwrap(), Compression::Lz4);
        assert!(Compression::parse("gzip").is_err());
    }

    #[test]
    fn objects_sealed_elsewhere_open_with_the_key() {
        let sealer = Sealer::new(KEY, None, "aes256gcm-rsa").unwrap();
        assert_eq!(sealer.open(SEALED_AES).unwrap(), PLAIN);
        // the cipher is named by the volume, but the same key opens either
        let sealer = Sealer::new(KEY_ENCRYPTED, Some(PASSPHRASE), "chacha20-rsa").unwrap();
        let opened = sealer.open(SEALED_CHACHA_ZSTD).unwrap();
        assert_eq!(
            Compression::Zstd.decompress(&opened, PLAIN.len()).unwrap(),
            PLAIN
        );
    }

    #[test]
    fn sealed_objects_have_juicefs_layout_and_open_again() {
        for algo in ["aes256gcm-rsa", "chacha20-rsa"] {
            let sealer = Sealer::new(KEY, None, algo).unwrap();
            let stored = sealer.seal(PLAIN).unwrap();
            assert_eq!(u16::from_be_bytes([stored[0], stored[1]]), 256, "{algo}");
            assert_eq!(stored[2] as usize, NONCE_LEN, "{algo}");
            assert_eq!(stored.len(), PLAIN.len() + sealer.overhead(), "{algo}");
            assert_eq!(sealer.open(&stored).unwrap(), PLAIN, "{algo}");
            // each object has a key of its own
            assert_ne!(
                sealer.seal(PLAIN).unwrap()[3..259],
                stored[3..259],
                "{algo}"
            );
        }
    }

    #[test]
    fn a_changed_byte_or_another_key_is_refused() {
        let sealer = Sealer::new(KEY, None, "aes256gcm-rsa").unwrap();
        let stored = sealer.seal(PLAIN).unwrap();
        // the header, the wrapped key, the nonce, the ciphertext, the tag
        for at in [
            1,
            2,
            100,
            3 + 256 + 5,
            3 + 256 + 12 + 1000,
            stored.len() - 1,
        ] {
            let mut changed = stored.clone();
            changed[at] ^= 0x20;
            let e = sealer.open(&changed).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "byte {at}: {e}");
        }
        assert!(sealer.open(&stored[..stored.len() - 1]).is_err());
        assert!(sealer.open(&stored[..10]).is_err());
        let other = Sealer::new(OTHER_KEY, None, "aes256gcm-rsa").unwrap();
        let e = other.open(&stored).unwrap_err();
        assert!(e.to_string().contains("another key"), "{e}");
    }

    #[test]
    fn keys_are_read_in_each_pem_form_and_a_passphrase_is_checked() {
        let plain = Sealer::new(KEY, None, "").unwrap();
        let pkcs1 = Sealer::new(KEY_PKCS1, None, "").unwrap();
        assert_eq!(
            pkcs1.open(&plain.seal(b"same key").unwrap()).unwrap(),
            b"same key"
        );
        let Err(e) = Sealer::new(KEY_ENCRYPTED, None, "") else {
            panic!("an encrypted key opened without its passphrase");
        };
        assert!(e.to_string().contains("JFS_RSA_PASSPHRASE"), "{e}");
        let Err(e) = Sealer::new(KEY_ENCRYPTED, Some("wrong"), "") else {
            panic!("an encrypted key opened with a wrong passphrase");
        };
        assert!(e.to_string().contains("wrong passphrase"), "{e}");
        // OpenSSL 1.x's encrypted form (`openssl rsa -aes256 -traditional`)
        for legacy in [KEY_LEGACY_AES256, KEY_LEGACY_AES128] {
            let sealer = Sealer::new(legacy, Some(PASSPHRASE), "").unwrap();
            assert_eq!(sealer.open(SEALED_AES).unwrap(), PLAIN);
            let Err(e) = Sealer::new(legacy, Some("wrong"), "") else {
                panic!("a legacy key opened with a wrong passphrase");
            };
            assert!(e.to_string().contains("wrong passphrase"), "{e}");
            assert!(Sealer::new(legacy, None, "").is_err());
        }
        assert!(Sealer::new("not a key", None, "").is_err());
        assert!(Sealer::new(KEY, None, "rot13").is_err());
    }
}
