//! Throwaway certificates for local TLS servers, made at run time with the `openssl` command:
//! a CA, a certificate for 127.0.0.1 signed by it (the servers' and the harness's), a client
//! certificate signed by it (the rebalancer's), and a second, untrusted CA with a client
//! certificate of its own (one the servers reject).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{LocalError, LocalTls};

/// The files [`make_certificates`] wrote.
#[derive(Clone, Debug)]
pub struct TestCertificates {
    /// The servers' TLS set-up: the CA, and the certificate for 127.0.0.1 with its key.
    pub server: LocalTls,
    /// A client certificate signed by the CA, and its key.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// A client certificate signed by another CA, which the servers reject.
    pub rogue_cert: PathBuf,
    /// Its key.
    pub rogue_key: PathBuf,
    /// The other CA's certificate (trusting it instead of the real CA fails the handshake).
    pub rogue_ca_cert: PathBuf,
}

/// Writes a CA, the server certificate, a client certificate and a rogue CA with its client
/// certificate (ECDSA P-256, valid two days) into `directory`.
pub fn make_certificates(directory: &Path) -> Result<TestCertificates, LocalError> {
    let path = |name: &str| directory.join(name);
    make_ca(directory, "ca", "ach-redis test CA")?;
    make_ca(directory, "rogue-ca", "an untrusted CA")?;
    let leaf_extensions = path("leaf.ext");
    std::fs::write(
        &leaf_extensions,
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n",
    )
    .map_err(|e| LocalError(format!("{}: {e}", leaf_extensions.display())))?;
    make_leaf(directory, "server", "ca", &leaf_extensions)?;
    make_leaf(directory, "client", "ca", &leaf_extensions)?;
    make_leaf(directory, "rogue", "rogue-ca", &leaf_extensions)?;
    Ok(TestCertificates {
        server: LocalTls {
            ca_cert: path("ca.crt"),
            cert: path("server.crt"),
            key: path("server.key"),
        },
        client_cert: path("client.crt"),
        client_key: path("client.key"),
        rogue_cert: path("rogue.crt"),
        rogue_key: path("rogue.key"),
        rogue_ca_cert: path("rogue-ca.crt"),
    })
}

/// `NAME.crt` and `NAME.key`: a self-signed CA.
fn make_ca(directory: &Path, name: &str, subject: &str) -> Result<(), LocalError> {
    openssl(
        directory,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={subject}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    )
}

/// `NAME.crt` and `NAME.key`: a certificate for 127.0.0.1 signed by the CA `ca`.
fn make_leaf(directory: &Path, name: &str, ca: &str, extensions: &Path) -> Result<(), LocalError> {
    openssl(
        directory,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    )?;
    openssl(
        directory,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &extensions.display().to_string(),
            "-out",
            &format!("{name}.crt"),
        ],
    )
}

fn openssl(directory: &Path, args: &[&str]) -> Result<(), LocalError> {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(directory)
        .output()
        .map_err(|e| {
            LocalError(format!(
                "cannot run openssl (apt-get install -y openssl): {e}"
            ))
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(LocalError(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}
