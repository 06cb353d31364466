package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.tools.Channels;
import io.disaggusage.extproc.tools.replay.ReplayInputException;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** Where {@code replay} sends the ext_proc streams: a running service ({@code --target}), plaintext or TLS. */
public final class TargetOptions {
  private static final Pattern HOST_PORT = Pattern.compile("(\\[[0-9A-Fa-f:.]+]|[^:\\[\\]]+):(\\d{1,5})");
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);

  @Spec(Spec.Target.MIXEE)
  CommandSpec spec;

  @Option(
      names = "--target",
      paramLabel = "HOST:PORT",
      description =
          "A running service's gRPC address (plaintext unless a --tls option is given). Default: a service"
              + " started in this process with --config.")
  String target;

  @Option(names = "--tls", description = "Connects to --target over TLS, trusting the system's CAs.")
  boolean tls;

  @Option(names = "--tls-ca", paramLabel = "FILE", description = "PEM CA certificates to trust for --target (implies TLS).")
  Path caFile;

  @Option(names = "--tls-cert", paramLabel = "FILE", description = "PEM client certificate for mutual TLS (with --tls-key).")
  Path certFile;

  @Option(names = "--tls-key", paramLabel = "FILE", description = "PEM private key of --tls-cert.")
  Path keyFile;

  /** A channel to the target and whether it connected. */
  public record Connection(ManagedChannel channel, boolean ready) implements AutoCloseable {
    @Override
    public void close() {
      channel.shutdownNow();
      try {
        channel.awaitTermination(2, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Whether a running service was named. */
  public boolean remote() {
    return target != null;
  }

  public String describe() {
    return target + (usesTls() ? " (TLS)" : " (plaintext)");
  }

  /**
   * Opens the channel and waits for it to connect.
   *
   * @throws ReplayInputException when a TLS file cannot be read
   */
  public Connection connect() throws ReplayInputException {
    Matcher m = HOST_PORT.matcher(target);
    int port = m.matches() ? Integer.parseInt(m.group(2)) : -1;
    if (port < 1 || port > 65535) {
      throw new ParameterException(spec.commandLine(), "--target: expected HOST:PORT, got \"" + target + "\"");
    }
    if ((certFile == null) != (keyFile == null)) {
      throw new ParameterException(spec.commandLine(), "--tls-cert and --tls-key go together");
    }
    String host = m.group(1).startsWith("[") ? m.group(1).substring(1, m.group(1).length() - 1) : m.group(1);
    ManagedChannel channel = Grpc.newChannelBuilderForAddress(host, port, credentials()).build();
    return new Connection(channel, Channels.awaitReady(channel, CONNECT_TIMEOUT));
  }

  private boolean usesTls() {
    return tls || caFile != null || certFile != null;
  }

  private ChannelCredentials credentials() throws ReplayInputException {
    if (!usesTls()) {
      return InsecureChannelCredentials.create();
    }
    TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
    Path file = caFile;
    try {
      if (caFile != null) {
        b.trustManager(caFile.toFile());
      }
      if (certFile != null) {
        file = certFile;
        b.keyManager(certFile.toFile(), keyFile.toFile());
      }
    } catch (IOException | IllegalArgumentException e) {
      throw new ReplayInputException(file, "cannot use as TLS material: " + e.getMessage(), e);
    }
    return b.build();
  }
}
