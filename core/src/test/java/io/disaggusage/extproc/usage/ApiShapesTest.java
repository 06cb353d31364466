package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Set;
import org.junit.jupiter.api.Test;

class ApiShapesTest {

  @Test
  void pathsChooseTheirShapeAndEveryOtherPathIsChat() {
    assertThat(ApiShapes.forPath("/v1/chat/completions")).isSameAs(ApiShapes.CHAT);
    assertThat(ApiShapes.forPath("/v1/completions")).isSameAs(ApiShapes.CHAT);
    assertThat(ApiShapes.forPath("/v1/responses")).isSameAs(ApiShapes.RESPONSES);
    assertThat(ApiShapes.forPath("/v1/messages")).isSameAs(ApiShapes.MESSAGES);
    assertThat(ApiShapes.forPath("/generate")).isSameAs(ApiShapes.CHAT);
    assertThat(ApiShapes.forPath(null)).isSameAs(ApiShapes.CHAT);
  }

  @Test
  void contextUsageShapeFollowsItsMembers() {
    assertThat(ApiShapes.forContextUsage(Set.of("prompt_tokens", "input_tokens"))).isSameAs(ApiShapes.CHAT);
    assertThat(ApiShapes.forContextUsage(Set.of("completion_tokens"))).isSameAs(ApiShapes.CHAT);
    assertThat(ApiShapes.forContextUsage(Set.of("input_tokens"))).isSameAs(ApiShapes.RESPONSES);
    assertThat(ApiShapes.forContextUsage(Set.of("input_tokens", "cache_read_input_tokens")))
        .isSameAs(ApiShapes.MESSAGES);
    assertThat(ApiShapes.forContextUsage(Set.of("input_tokens", "cache_creation_input_tokens")))
        .isSameAs(ApiShapes.MESSAGES);
    assertThat(ApiShapes.forContextUsage(Set.of("prompt_tokens", "input_tokens", "cache_read_input_tokens")))
        .isSameAs(ApiShapes.CHAT);
  }

  @Test
  void onlyTheResponsesApiIsLeftWithoutInjection() {
    assertThat(ApiShapes.CHAT.injectsIncludeUsage()).isTrue();
    assertThat(ApiShapes.MESSAGES.injectsIncludeUsage()).isTrue();
    assertThat(ApiShapes.RESPONSES.injectsIncludeUsage()).isFalse();
  }

  @Test
  void unionsCoverEveryShape() {
    assertThat(ApiShapes.usageContainers()).containsExactlyInAnyOrder("response", "message");
    assertThat(ApiShapes.usageDetailObjects())
        .containsExactlyInAnyOrder(
            "prompt_tokens_details", "completion_tokens_details", "input_tokens_details", "output_tokens_details");
  }
}
