package io.disaggusage.extproc.emulator.engines;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class WordTokenizerTest {
  private final WordTokenizer tokenizer = new WordTokenizer();

  @Test
  void wordsNumbersAndPunctuationAreTokensWithStableIds() {
    int[] ids = tokenizer.encode("KV-cache hit, 100 %!");
    assertThat(ids).hasSize(8); // KV - cache hit , 100 % !
    assertThat(tokenizer.encode("KV-cache hit, 100 %!")).isEqualTo(ids);
    assertThat(IntStream.of(ids).allMatch(id -> id >= 0 && id < WordTokenizer.VOCABULARY)).isTrue();
    assertThat(tokenizer.encode("cache")[0]).isEqualTo(ids[2]);
  }

  @Test
  void piecesKeepTheSpacingSoTheyJoinBackIntoTheText() {
    String text = "Paris is the capital, isn't it?";
    List<String> pieces = tokenizer.pieces(text);
    assertThat(String.join("", pieces)).isEqualTo(text);
    assertThat(pieces).hasSize(tokenizer.encode(text).length).startsWith("Paris", " is");
  }

  @Test
  void aChatPromptHasABeginMarkerARoleMarkerPerMessageAndAnAssistantMarker() {
    List<Message> chat = List.of(new Message("system", "Be brief."), new Message("user", "Hi!"));
    int[] ids = tokenizer.encodeChat(chat);
    assertThat(ids).hasSize(1 + (1 + 3) + (1 + 2) + 1);
    assertThat(ids[0]).isEqualTo(WordTokenizer.BEGIN_OF_TEXT);
    assertThat(ids[1]).isGreaterThan(WordTokenizer.BEGIN_OF_TEXT).isNotEqualTo(ids[5]);
    assertThat(tokenizer.encodeChat(chat)).isEqualTo(ids);
  }
}
