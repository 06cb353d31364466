package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.FreePorts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;

/**
 * A redis-server that speaks TLS only (its plain port off) with a server certificate of a {@link PrivateCa},
 * asks clients for no certificate, and knows two ACL users: {@code default}, off, and {@link #USER} with
 * {@link #STORE_RULES} and a password. Its ACL file holds the password's SHA-256, never the password.
 */
final class TlsRedisProcess extends RedisProcess {
  /** The store's ACL user. */
  static final String USER = "disagg-usage";
  /**
   * The least the store needs, with the default key prefix (docs/redis.md quotes it): its keys (one hash
   * tag) and its wake-up channel; the scripts by SHA-1, whole after a NOSCRIPT, and loaded on connect; the
   * subscription; and every command its scripts call (Redis checks those against the user too).
   */
  static final String STORE_RULES = "resetkeys ~{disagg_usage:v2}:* resetchannels &disagg_usage:v2:ready -@all"
      + " +evalsha +eval +script|load +subscribe"
      + " +time +get +set +del +pexpire +zadd +zrem +zcard +zcount +zscore +zrange +zremrangebyscore +zremrangebyrank"
      + " +publish";

  private final PrivateCa ca;
  private final String password;

  /** A node on a fresh port whose store user has {@code password}; not started yet. */
  TlsRedisProcess(String name, PrivateCa ca, String password) {
    super(name, FreePorts.next(), List.of("--aclfile", aclFile(name, password).toString()));
    this.ca = ca;
    this.password = password;
  }

  /** Writes the ACL file: {@code default} off, {@link #USER} with the password's SHA-256 and {@link #STORE_RULES}. */
  private static Path aclFile(String name, String password) {
    Path file = Tools.logs().resolve(name + "-users.acl");
    try {
      Files.writeString(file, String.join("\n",
          "user default off",
          "user " + USER + " on #" + sha256(password) + " " + STORE_RULES,
          ""));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return file;
  }

  @Override
  public TlsRedisProcess start() {
    super.start();
    return this;
  }

  /** TLS on {@link #port()} with the CA's server certificate, the plain port off, no client certificate asked. */
  @Override
  protected List<String> listenArguments() {
    return List.of("--port", "0", "--tls-port", Integer.toString(port()),
        "--tls-cert-file", ca.serverCertificate().toString(), "--tls-key-file", ca.serverKey().toString(),
        "--tls-ca-cert-file", ca.certificate().toString(), "--tls-auth-clients", "no");
  }

  /** Whether it accepts connections: a PING in plain text would not reach a TLS-only port's Redis. */
  @Override
  protected boolean ready() {
    return FreePorts.accepts(port());
  }

  /** {@code rediss://disagg-usage:<password>@127.0.0.1:<port>}. */
  @Override
  public String uri() {
    return uri(password);
  }

  /** This node's URI as {@link #USER} with {@code password} (a wrong one, say). */
  String uri(String password) {
    return "rediss://" + USER + ":" + password + "@" + address();
  }

  @Override
  String[] storeSettings() {
    return storeSettings(password);
  }

  /**
   * The service settings of a replica whose store is this node, as {@link #USER} with {@code password}: the
   * URI in {@code DISAGG_USAGE_STORE_REDIS_URI}, as a Kubernetes Secret would give it, not on the command line.
   */
  String[] storeSettings(String password) {
    return new String[] {"--set", "store.type=redis", "DISAGG_USAGE_STORE_REDIS_URI=" + uri(password)};
  }

  private static String sha256(String text) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
