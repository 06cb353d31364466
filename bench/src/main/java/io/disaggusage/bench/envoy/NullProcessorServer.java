package io.disaggusage.bench.envoy;

import io.disaggusage.bench.e2e.NullProcessor;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.grpc.Server;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * The null processor as a process: {@link NullProcessor} on a loopback port with gRPC health SERVING
 * for the ext_proc service (the shipped cluster health-checks it). Its gRPC settings are the service's
 * defaults (handlers on the transport's event loop, keepalive 30 s / 10 s, Envoy's pings tolerated
 * every 10 s), so the floor differs from the service only in what it does per message.
 *
 * <pre>java -cp disagg-usage-bench.jar io.disaggusage.bench.envoy.NullProcessorServer PORT</pre>
 */
public final class NullProcessorServer {
  private NullProcessorServer() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    HealthStatusManager health = new HealthStatusManager();
    health.setStatus(ExternalProcessorGrpc.SERVICE_NAME, ServingStatus.SERVING);
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
        .keepAliveTime(30, TimeUnit.SECONDS)
        .keepAliveTimeout(10, TimeUnit.SECONDS)
        .permitKeepAliveTime(10, TimeUnit.SECONDS)
        .permitKeepAliveWithoutCalls(true)
        .directExecutor()
        .addService(new NullProcessor())
        .addService(health.getHealthService())
        .build()
        .start();
    System.err.println("null processor serving on 127.0.0.1:" + port);
    server.awaitTermination();
  }
}
