//! An S3-compatible server on loopback (moto) for volumes on S3.
use std::process::Command;

use crate::{eventually, ok};

/// An S3-compatible server (moto, from the venv scripts/setup.sh makes) on a
/// free loopback port; killed when dropped.
pub struct S3Server {
    pub endpoint: String,
    pub port: u16,
    child: Option<std::process::Child>,
}

/// The virtualenv of the test tools (moto, the Python codecs, the jfs
/// package and its test dependencies), which scripts/setup.sh --tests makes.
pub fn venv() -> String {
    std::env::var("JFS_VENV").unwrap_or_else(|_| "/opt/jfs-test-venv".into())
}

/// The Python of [`venv`].
pub fn venv_python() -> String {
    venv() + "/bin/python"
}

impl S3Server {
    /// Starts moto on a port it binds itself (`-p 0`) and reads back from its
    /// banner, so no other process can take the port between a choice and
    /// the bind.
    pub fn start() -> S3Server {
        let mut child = Command::new(format!("{}/bin/moto_server", venv()))
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("moto_server: run scripts/setup.sh");
        let mut banner = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut port = None;
        let mut seen = String::new();
        while port.is_none() {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut banner, &mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                panic!("moto_server exited before it listened:\n{seen}");
            }
            port = line
                .split("Running on http://127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.trim().parse::<u16>().ok());
            seen.push_str(&line);
        }
        // moto logs every request to stderr: keep draining it so it never
        // blocks on a full pipe
        std::thread::spawn(move || std::io::copy(&mut banner, &mut std::io::sink()));
        let port = port.unwrap();
        let up = eventually(20, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "moto_server did not answer on port {port}");
        S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
            child: Some(child),
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Keys in a bucket (through boto3 from the same venv) but volumes'
    /// markers (`NAME/juicefs_uuid`): the blocks.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
             aws_secret_access_key='testing', region_name='us-east-1')\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}'):\n    \
             [print(o['Key']) for o in page.get('Contents', [])]\n",
            self.endpoint
        );
        let out = ok(Command::new(format!("{}/bin/python", venv())).args(["-c", &code]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|k| !k.ends_with("/juicefs_uuid"))
            .map(str::to_string)
            .collect()
    }
}

impl S3Server {
    /// Each object's storage class as HeadObject reports it ("STANDARD" when
    /// the server says none), by key.
    pub fn classes(&self, bucket: &str) -> Vec<(String, String)> {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
             aws_secret_access_key='testing', region_name='us-east-1')\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}'):\n    \
             for o in page.get('Contents', []):\n        \
             h = s3.head_object(Bucket='{bucket}', Key=o['Key'])\n        \
             print(o['Key'], h.get('StorageClass', 'STANDARD'))\n",
            self.endpoint
        );
        let out = ok(Command::new(format!("{}/bin/python", venv())).args(["-c", &code]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, c)| (k.to_string(), c.to_string()))
            .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
