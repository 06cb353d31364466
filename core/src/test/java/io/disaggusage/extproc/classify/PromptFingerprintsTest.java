package io.disaggusage.extproc.classify;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.MsgpackBodies;
import io.disaggusage.extproc.testkit.MsgpackBodies.Style;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** {@link PromptFingerprints#of}: the service's fingerprint of a whole body, JSON or MessagePack. */
class PromptFingerprintsTest {
  @Test
  void theServicesFingerprintOfEveryVectorInBothEncodings() {
    for (String body : PromptFingerprintTest.vectors()) {
      PromptFingerprint expected = PromptFingerprintTest.json(body);
      assertThat(expected).as(body).isNotNull();
      assertThat(PromptFingerprints.of(body.getBytes(StandardCharsets.UTF_8), false)).as(body).isEqualTo(expected);
      for (Style style : Style.values()) {
        assertThat(PromptFingerprints.of(MsgpackBodies.fromJson(body, style), true)).as("%s %s", style, body).isEqualTo(expected);
      }
    }
  }

  @Test
  void nullWithoutAPromptOrForAMalformedBody() {
    for (String body : new String[] {"{\"model\":\"m\",\"max_tokens\":3}", "{\"model\":\"m\",\"prompt\":\"a\"", "", "[]"}) {
      assertThat(PromptFingerprints.of(body.getBytes(StandardCharsets.UTF_8), false)).as(body).isNull();
    }
  }
}
