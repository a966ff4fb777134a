//! The node agent sending to an https:// Faultline: the site's TLS front (here a rustls acceptor
//! before the real server) with a certificate of the site's own authority. Without that authority
//! the agent trusts nothing, says why in its status and keeps every signal; given it
//! (`--ca-file`), everything arrives once.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{ServerConfig, crypto::ring::default_provider};

use crate::agent::{Node, SIGNAL_IDS, wait_count, xids};
use crate::helpers::{TestApp, spawn_app};

/// A certificate authority (its PEM) and a TLS front for `app` on 127.0.0.1 with a certificate
/// it issued; answers the front's https:// URL.
pub async fn tls_front(app: &TestApp) -> (String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Faultline test site CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();

    let config = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![server_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let upstream = app.address.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate aborts the handshake here.
                let Ok(mut client) = acceptor.accept(client).await else {
                    return;
                };
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (url, ca.pem())
}

#[tokio::test]
async fn an_https_server_of_the_sites_own_authority_is_trusted_with_ca_file_and_nothing_is_lost_before() {
    let app = spawn_app().await;
    let (url, ca_pem) = tls_front(&app).await;
    let node = Node::new(&app, &url).await;
    node.append_kmsg(&xids(0..3, 79));

    // The host's store does not know the site's authority: nothing is sent, the status says why,
    // and the signals wait in the spool.
    let mut agent = node.start(&[]);
    let s = node
        .wait_status("a refused certificate", |s| {
            s["spool_records"] == 3
                && s["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("certificate") && e.contains("UnknownIssuer"))
        })
        .await;
    agent.kill();
    assert_eq!(s["counters"]["sent_accepted"], 0, "{s}");
    assert_eq!(app.count(SIGNAL_IDS).await, 0);

    // Given the authority, the backlog arrives, once.
    let ca_file = node.dir.join("site-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    node.oneshot(&["--ca-file", ca_file.to_str().unwrap()]).await;
    wait_count(&app, SIGNAL_IDS, 3, &node).await;
    let s = node.status();
    assert_eq!(
        (
            s["spool_records"].as_u64(),
            s["counters"]["sent_accepted"].as_u64(),
            s["counters"]["sent_duplicates"].as_u64()
        ),
        (Some(0), Some(3), Some(0)),
        "{s}"
    );
    assert_eq!(
        app.count("SELECT coalesce(sum(repeat_count), 0) FROM events WHERE cluster = 'c1' AND code = 79")
            .await,
        3
    );
}
