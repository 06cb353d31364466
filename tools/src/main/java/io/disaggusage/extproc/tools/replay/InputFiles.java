package io.disaggusage.extproc.tools.replay;

import io.disaggusage.extproc.driver.FilterConfigs;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Reading replay input files, with errors that name the file. */
public final class InputFiles {
  private InputFiles() {}

  /** A body file's bytes, exactly. */
  public static byte[] bytes(Path file) throws ReplayInputException {
    try {
      return Files.readAllBytes(file);
    } catch (IOException e) {
      throw new ReplayInputException(file, "cannot read: " + IoProblems.describe(e), e);
    }
  }

  /** The ext_proc filter settings of a YAML/JSON file ({@link FilterConfigs#parse}). */
  public static ExternalProcessor envoyConfig(Path file) throws ReplayInputException {
    try {
      return FilterConfigs.parse(new String(bytes(file), StandardCharsets.UTF_8));
    } catch (IllegalArgumentException e) {
      throw new ReplayInputException(file, e.getMessage(), e);
    }
  }
}
