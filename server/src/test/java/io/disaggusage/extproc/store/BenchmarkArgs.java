package io.disaggusage.extproc.store;

/** What the store benchmarks' {@code main} methods share: their positional arguments and the redis-server they need. */
final class BenchmarkArgs {
  private BenchmarkArgs() {}

  /** The {@code index}th argument as an integer, or {@code otherwise} when it was not given. */
  static int intArg(String[] args, int index, int otherwise) {
    return args.length > index ? Integer.parseInt(args[index]) : otherwise;
  }

  /** Exits with status 2, saying why, when redis-server is not installed in .tools/bin. */
  static void requireRedisServer() {
    if (!RedisServer.available()) {
      System.err.println(RedisServer.BINARY + " is not installed in .tools/bin: run scripts/install-test-tools");
      System.exit(2);
    }
  }
}
