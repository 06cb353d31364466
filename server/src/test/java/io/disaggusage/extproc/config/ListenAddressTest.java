package io.disaggusage.extproc.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class ListenAddressTest {

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          127.0.0.1         | 127.0.0.1   | 127.0.0.1:9002
          ' 10.1.2.3 '      | 10.1.2.3    | 10.1.2.3:9002
          localhost         | localhost   | localhost:9002
          extproc.svc.local | extproc.svc.local | extproc.svc.local:9002
          ::1               | ::1         | [::1]:9002
          [::1]             | ::1         | [::1]:9002
          0.0.0.0           | 0.0.0.0     | 0.0.0.0:9002
          fe80::1%eth0      | fe80::1%eth0 | [fe80::1%eth0]:9002
          """)
  void hostsAreTcpAddressesOnGrpcPort(String text, String host, String described) {
    ListenAddress address = ListenAddress.parse(text);
    assertThat(address.kind()).isEqualTo(ListenAddress.Kind.HOST);
    assertThat(address.host()).isEqualTo(host);
    assertThat(address.socketPath()).isNull();
    assertThat(address.describe(9002)).isEqualTo(described);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "  "})
  void emptyMeansEveryInterface(String text) {
    ListenAddress address = ListenAddress.parse(text);
    assertThat(address.kind()).isEqualTo(ListenAddress.Kind.ALL_INTERFACES);
    assertThat(address.isUnix()).isFalse();
    assertThat(address.describe(9002)).isEqualTo("port 9002");
  }

  @ParameterizedTest
  @CsvSource({
    "unix:///run/disagg-usage/extproc.sock, /run/disagg-usage/extproc.sock",
    "UNIX:///tmp/x.sock, /tmp/x.sock",
    "unix:///run//a/../extproc.sock, /run/extproc.sock"
  })
  void unixSocketsNeedAnAbsolutePath(String text, String path) {
    ListenAddress address = ListenAddress.parse(text);
    assertThat(address.isUnix()).isTrue();
    assertThat(address.socketPath()).isEqualTo(Path.of(path));
    assertThat(address.describe(-1)).isEqualTo("unix://" + path);
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          127.0.0.1:9002  | must be a host or address without a port
          [::1            | must be a host or address without a port
          [nope]          | must be a host or address without a port
          ::g             | is not a valid IPv6 address
          http://h        | is not a host or a unix:// socket path
          -bad            | is not a valid host name or address
          unix://x.sock   | must be unix:// followed by an absolute path
          unix:x.sock     | must be unix:// followed by an absolute path
          unix:///run/    | names a directory, not a socket file
          """)
  void rejectsEverythingElseWithAReason(String text, String reason) {
    assertThatThrownBy(() -> ListenAddress.parse(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(reason);
  }
}
