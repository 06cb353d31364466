/**
 * The edge guard's pure core: {@link io.disaggusage.extproc.edge.MemberRemover} takes the members only
 * the prefill/decode machinery may set ({@link io.disaggusage.extproc.edge.MemberPaths}) out of a
 * client's JSON request body as it streams, leaving every other byte as the client sent it, and says
 * when a body is not one JSON object it could check ({@link io.disaggusage.extproc.edge.Rejection}).
 */
package io.disaggusage.extproc.edge;
