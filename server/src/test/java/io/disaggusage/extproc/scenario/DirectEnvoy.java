package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.driver.EnvoyStream;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;

/**
 * Envoy's ext_proc filter reduced to what decides the client-visible bytes ({@link EnvoyStream}),
 * calling the service's {@code process} directly (no gRPC, no threads): the fast driver of the
 * property and fuzz tests. Timers, buffering limits and header mutations are the fake Envoy's job
 * ({@code emulator.envoy}); this driver trades them for speed.
 */
public final class DirectEnvoy {
  private final ExternalProcessorGrpc.AsyncService service;

  public DirectEnvoy(ExternalProcessorGrpc.AsyncService service) {
    this.service = service;
  }

  /** Opens a stream; the service sees nothing until the first message. */
  public EnvoyStream open() {
    return EnvoyStream.open(service::process);
  }
}
