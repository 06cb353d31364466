package io.disaggusage.extproc;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** The build's version, read from the Maven metadata packed into the jar. */
public final class Version {
  private static final String POM_PROPERTIES =
      "/META-INF/maven/io.disaggusage/disagg-usage-extproc/pom.properties";
  private static final String CURRENT = read();

  private Version() {}

  /** For example {@code 0.1.0}; {@code development} when running from classes rather than the jar. */
  public static String current() {
    return CURRENT;
  }

  private static String read() {
    try (InputStream in = Version.class.getResourceAsStream(POM_PROPERTIES)) {
      if (in != null) {
        Properties properties = new Properties();
        properties.load(in);
        String version = properties.getProperty("version");
        if (version != null && !version.isBlank()) {
          return version;
        }
      }
    } catch (IOException e) {
      // fall through to the manifest
    }
    String implementation = Version.class.getPackage().getImplementationVersion();
    return implementation != null ? implementation : "development";
  }
}
