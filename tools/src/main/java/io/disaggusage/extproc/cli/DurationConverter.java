package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.config.ConfigLoader;
import java.time.Duration;
import picocli.CommandLine.ITypeConverter;

/** Reads a duration option the way configuration durations are read: {@code 250ms}, {@code 2s}, {@code PT2S}. */
public final class DurationConverter implements ITypeConverter<Duration> {
  @Override
  public Duration convert(String value) {
    Duration d = ConfigLoader.parseDuration(value);
    if (d.isNegative()) {
      throw new IllegalArgumentException("negative duration \"" + value + "\"");
    }
    return d;
  }
}
