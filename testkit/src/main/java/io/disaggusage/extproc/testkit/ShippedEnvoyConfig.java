package io.disaggusage.extproc.testkit;

import io.disaggusage.extproc.driver.FilterConfigs;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The ext_proc filter settings of the Envoy bootstrap the project ships ({@code deploy/envoy/envoy.yaml}),
 * so the scenario suite runs against exactly what users deploy: a change there that breaks correction
 * fails the build.
 */
public final class ShippedEnvoyConfig {
  private ShippedEnvoyConfig() {}

  public static Path bootstrapFile() {
    String root = System.getProperty("project.root", "..");
    return Path.of(root).resolve("deploy/envoy/envoy.yaml").toAbsolutePath().normalize();
  }

  /** The ext_proc filter config of the shipped bootstrap, parsed strictly into Envoy's type. */
  public static ExternalProcessor extProcFilter() {
    try {
      return FilterConfigs.parse(Files.readString(bootstrapFile()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
