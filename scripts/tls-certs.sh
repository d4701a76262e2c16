#!/usr/bin/env bash
# Makes a certificate authority, a server certificate and a client certificate for trying TLS
# out, with the openssl command line. Usage:
#
#   scripts/tls-certs.sh DIR [NAME...]
#
# DIR gets (keys unencrypted, readable by the owner only):
#   ca.pem, ca.key          the CA: give ca.pem to clients (--tls-ca) so they trust the daemon,
#                           and to the daemon (--tls-ca) to require client certificates
#   server.pem, server.key  for the daemon: scened --tls-cert DIR/server.pem --tls-key DIR/server.key
#                           valid for localhost, 127.0.0.1, ::1 and each NAME (a host name or IP);
#                           also for etcd over TLS (--cert-file/--key-file), whose JSON gateway
#                           presents it to etcd itself, so it allows client authentication too
#   client.pem, client.key  a client certificate signed by the CA (scenectl --tls-cert/--tls-key,
#                           scened --etcd-cert/--etcd-key)
#
# Keys are ECDSA P-256 (cheap handshakes); TLS_CERT_KEY=rsa makes RSA 2048 keys instead, for
# clients whose TLS takes no ECDSA certificate (Mono's, under the C# client's tests). For
# production, use certificates from your own CA or a public one; this is for trying it out and
# for the tests.
set -euo pipefail
dir=${1:?usage: tls-certs.sh DIR [NAME...]}
shift
days=${TLS_CERT_DAYS:-825}
mkdir -p "$dir"
umask 077
cd "$dir"

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then
    san="$san,IP:$name"
  else
    san="$san,DNS:$name"
  fi
done

usage=digitalSignature
case ${TLS_CERT_KEY:-ec} in
  ec) key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; } ;;
  rsa)
    key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }
    usage=digitalSignature,keyEncipherment
    ;;
  *) echo "tls-certs.sh: TLS_CERT_KEY is ec or rsa, not ${TLS_CERT_KEY}" >&2; exit 2 ;;
esac

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$((days + 365))" -subj "/CN=scened test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem

# sign NAME CN EXTENSIONS: NAME.key and NAME.pem, signed by the CA
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 \
    -days "$days" -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
sign server "scened" "basicConstraints=CA:FALSE
keyUsage=critical,$usage
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
sign client "scened client" "basicConstraints=CA:FALSE
keyUsage=critical,$usage
extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 644 ca.pem server.pem client.pem
echo "made ca.pem, server.pem/.key and client.pem/.key in $dir (server names: $san)"
