package io.disaggusage.extproc.cli;

import io.disaggusage.extproc.emulator.envoy.HeaderList;
import io.disaggusage.extproc.tools.replay.HarFile;
import io.disaggusage.extproc.tools.replay.HeadersFile;
import io.disaggusage.extproc.tools.replay.InputFiles;
import io.disaggusage.extproc.tools.replay.ReplayInput;
import io.disaggusage.extproc.tools.replay.ReplayInputException;
import io.disaggusage.extproc.tools.replay.ReplayLeg;
import java.nio.file.Path;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Option;

/** {@code replay}'s input: body and headers files per leg, or one HAR file (a picocli argument group). */
final class ReplayFiles {

  @ArgGroup(exclusive = false, heading = "%nCaptured exchanges, one file per body (headers files optional):%n")
  LegFiles legs;

  @Option(
      names = "--har",
      paramLabel = "FILE",
      description = "Both legs from one HAR (or HAR-like) JSON file; see docs/demo-and-replay.md.")
  Path har;

  /** The body and headers files of both legs. */
  static final class LegFiles {
    @Option(names = "--context-request", paramLabel = "FILE", description = "Context request body.")
    Path contextRequest;

    @Option(names = "--context-request-headers", paramLabel = "FILE", description = "Context request headers.")
    Path contextRequestHeaders;

    @Option(names = "--context-response", paramLabel = "FILE", description = "Context response body.")
    Path contextResponse;

    @Option(names = "--context-response-headers", paramLabel = "FILE", description = "Context response headers.")
    Path contextResponseHeaders;

    @Option(names = "--generation-request", paramLabel = "FILE", required = true, description = "Generation request body.")
    Path generationRequest;

    @Option(names = "--generation-request-headers", paramLabel = "FILE", description = "Generation request headers.")
    Path generationRequestHeaders;

    @Option(names = "--generation-response", paramLabel = "FILE", required = true, description = "Generation response body.")
    Path generationResponse;

    @Option(names = "--generation-response-headers", paramLabel = "FILE", description = "Generation response headers.")
    Path generationResponseHeaders;
  }

  /**
   * Reads the legs; a cluster given here wins over one in the HAR file.
   *
   * @throws ReplayInputException naming the file that is missing or malformed
   * @throws IllegalArgumentException when the context files are given by halves
   */
  ReplayInput read(String contextCluster, String generationCluster) throws ReplayInputException {
    ReplayInput input = har != null ? HarFile.read(har) : fromLegFiles();
    ReplayLeg context = input.context();
    ReplayLeg generation = input.generation();
    if (context != null && contextCluster != null) {
      context = context.withCluster(contextCluster);
    }
    if (generationCluster != null) {
      generation = generation.withCluster(generationCluster);
    }
    return new ReplayInput(context, generation);
  }

  private ReplayInput fromLegFiles() throws ReplayInputException {
    LegFiles f = legs;
    ReplayLeg generation =
        leg(f.generationRequest, f.generationRequestHeaders, f.generationResponse, f.generationResponseHeaders);
    boolean anyContext =
        f.contextRequest != null || f.contextResponse != null
            || f.contextRequestHeaders != null || f.contextResponseHeaders != null;
    if (!anyContext) {
      return new ReplayInput(null, generation);
    }
    if (f.contextRequest == null || f.contextResponse == null) {
      throw new IllegalArgumentException(
          "give both --context-request and --context-response, or neither (to replay the generation exchange alone)");
    }
    return new ReplayInput(
        leg(f.contextRequest, f.contextRequestHeaders, f.contextResponse, f.contextResponseHeaders), generation);
  }

  private static ReplayLeg leg(Path request, Path requestHeaders, Path response, Path responseHeaders)
      throws ReplayInputException {
    HeaderList reqHeaders = requestHeaders == null ? null : HeadersFile.readRequest(requestHeaders);
    HeaderList respHeaders = responseHeaders == null ? null : HeadersFile.readResponse(responseHeaders);
    return ReplayLeg.withDefaultHeaders(
        reqHeaders, InputFiles.bytes(request), respHeaders, InputFiles.bytes(response), null);
  }
}
