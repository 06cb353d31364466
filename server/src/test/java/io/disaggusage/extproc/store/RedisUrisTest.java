package io.disaggusage.extproc.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.lettuce.core.RedisURI;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Every form of {@code store.redis_uri} docs/redis.md gives, read as the store connects with it. */
class RedisUrisTest {

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', textBlock = """
      redis://127.0.0.1:6379                                        | false | 127.0.0.1:6379
      redis://redis.example                                         | false | redis.example:6379
      rediss://redis.example:6380                                   | false | redis.example:6380
      redis://:s3cret@redis.example:6379/2                          | false | redis.example:6379
      rediss://app-user:s3cret@redis.example:6380/3                 | false | redis.example:6380
      redis-sentinel://s1:26379,s2:26379,s3:26379/0#mymaster        | false | sentinel master mymaster via s1:26379,s2:26379,s3:26379
      redis-sentinel://:s3cret@s1:26379,s2:26379,s3:26379/0#mymaster | false | sentinel master mymaster via s1:26379,s2:26379,s3:26379
      rediss-sentinel://s1:26379,s2:26379#mymaster                  | false | sentinel master mymaster via s1:26379,s2:26379
      redis://node-0:7000                                           | true  | node-0:7000
      redis://node-0:7000,node-1:7001,node-2:7002                   | true  | node-0:7000,node-1:7001,node-2:7002
      rediss://app-user:s3cret@node-0:7000,node-1:7001              | true  | node-0:7000,node-1:7001
      """)
  void everyDocumentedFormIsRead(String uri, boolean cluster, String nodes) {
    List<RedisURI> parsed = RedisUris.parse(uri, cluster);
    assertThat(RedisUris.describe(parsed)).isEqualTo(nodes).doesNotContain("s3cret");
    boolean tls = uri.startsWith("rediss");
    assertThat(parsed).allSatisfy(node -> assertThat(node.isSsl()).isEqualTo(tls));
    if (uri.contains("s3cret")) {
      assertThat(parsed).allSatisfy(node -> assertThat(node.getCredentialsProvider().resolveCredentials().block().getPassword())
          .isEqualTo("s3cret".toCharArray()));
    }
    if (uri.contains("app-user")) {
      assertThat(parsed).allSatisfy(node ->
          assertThat(node.getCredentialsProvider().resolveCredentials().block().getUsername()).isEqualTo("app-user"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', textBlock = """
      redis://:s3cret@redis.example:6379/2            | 2
      redis-sentinel://s1:26379,s2:26379/5#mymaster   | 5
      redis://redis.example                           | 0
      """)
  void theDatabaseIndexIsKept(String uri, int database) {
    assertThat(RedisUris.parse(uri, false).get(0).getDatabase()).isEqualTo(database);
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', textBlock = """
      http://user:s3cret@redis:6379                | false | must be a redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URI
      redis://user:s3cret@                         | false | invalid Redis URI "redis://***@"
      redis://user:s3cret@redis:6379/x             | false | the database (path) must be a number
      redis:///0                                   | false | cannot get host
      redis://:s3cret@h1:6379,h2:6379              | false | names several hosts: Cluster seed nodes need store.redis_cluster: true
      redis-sentinel://:s3cret@s1:26379,s2:26379/0 | false | URI must contain the sentinelMasterId
      redis-sentinel://s1:26379#mymaster           | true  | is a Sentinel URI
      redis://:s3cret@,                            | true  | has no host
      """)
  void aWrongUriSaysWhatIsWrongWithoutItsPassword(String uri, boolean cluster, String message) {
    assertThatThrownBy(() -> RedisUris.parse(uri, cluster))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(message)
        .message()
        .doesNotContain("s3cret");
  }

  @ParameterizedTest
  @ValueSource(strings = {"redis://:s3cret@h:6379", "rediss://u:s3cret@h", "redis-sentinel://:s3cret@s1,s2#m"})
  void aDescriptionNeverCarriesCredentials(String uri) {
    assertThat(RedisUris.describe(RedisUris.parse(uri, false))).doesNotContain("s3cret").doesNotContain("@");
  }
}
