package io.disaggusage.extproc.classify;

import java.util.Locale;
import java.util.Map;

/**
 * The parts of a request's headers that classification reads.
 *
 * @param method {@code :method}
 * @param path {@code :path} without its query string
 * @param headers lower-case header names to their first value
 * @param clusterName the {@code xds.cluster_name} request attribute, or null
 */
public record RequestHead(String method, String path, Map<String, String> headers, String clusterName) {

  public String header(String name) {
    return headers.get(name.toLowerCase(Locale.ROOT));
  }
}
