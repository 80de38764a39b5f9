// pg-boss 10, driven for the pgboss preset test through its own API:
//   node pgboss.js install DSN QUEUE...         the schema and the queues
//   node pgboss.js send DSN JOBS                 JOBS: JSON [{queue, options}]; prints ids
//   node pgboss.js fetch DSN QUEUE N OUTCOME     fetch N and complete, fail or cancel them
//   node pgboss.js run DSN JOBS OUTCOME          send JOBS (one queue), fetch them, the same
//   node pgboss.js cancel DSN QUEUE ID...        cancel these jobs
//   node pgboss.js hold DSN QUEUE                fetch one and hold it until killed
//   node pgboss.js states DSN                    pg-boss's own count of each queue's states
//   node pgboss.js expire DSN                    run pg-boss's expiry once, then count states
//   node pgboss.js schedule DSN QUEUE CRON TZ    schedule QUEUE, then run pg-boss's cron
//                                                monitor until it has looked once
// Maintenance is off (supervise: false), so nothing expires a job behind the test:
// only the expire command runs pg-boss's expiry, once, when the test asks.
'use strict'
const PgBoss = require('pg-boss')

async function main () {
  const [command, dsn, ...rest] = process.argv.slice(2)
  const boss = new PgBoss({ connectionString: dsn, supervise: false, schedule: false })
  boss.on('error', (error) => console.error(error.message))
  await boss.start()
  if (command === 'install') {
    for (const name of rest) await boss.createQueue(name)
  } else if (command === 'send') {
    const ids = []
    for (const job of JSON.parse(rest[0])) ids.push(await boss.send(job.queue, {}, job.options || {}))
    console.log(JSON.stringify(ids))
  } else if (command === 'fetch') {
    const [queue, count, outcome] = rest
    const jobs = await boss.fetch(queue, { batchSize: Number(count) })
    for (const job of jobs) await boss[outcome](queue, job.id)
    console.log(JSON.stringify(jobs.map((job) => job.id)))
  } else if (command === 'run') {
    const sent = JSON.parse(rest[0])
    for (const job of sent) await boss.send(job.queue, {}, job.options || {})
    const queue = sent[0].queue
    const jobs = await boss.fetch(queue, { batchSize: sent.length })
    for (const job of jobs) await boss[rest[1]](queue, job.id)
    console.log(JSON.stringify(jobs.map((job) => job.id)))
  } else if (command === 'cancel') {
    await boss.cancel(rest[0], rest.slice(1))
  } else if (command === 'states') {
    console.log(JSON.stringify(await boss.countStates()))
  } else if (command === 'expire') {
    await boss.expire()
    console.log(JSON.stringify(await boss.countStates()))
  } else if (command === 'schedule') {
    const [queue, cron, tz] = rest
    await boss.createQueue(queue)
    await boss.schedule(queue, cron, null, { tz })
    const monitor = new PgBoss({ connectionString: dsn, supervise: false, cronMonitorIntervalSeconds: 1 })
    monitor.on('error', (error) => console.error(error.message))
    await monitor.start()
    const looked = async () => {
      const { rows } = await monitor.getDb().executeSql('SELECT cron_on FROM pgboss.version')
      return rows.length > 0 && rows[0].cron_on !== null
    }
    while (!(await looked())) await new Promise((resolve) => setTimeout(resolve, 100))
    await monitor.stop({ graceful: false, wait: true })
  } else if (command === 'hold') {
    const jobs = await boss.fetch(rest[0], { batchSize: 1 })
    console.log(JSON.stringify(jobs.map((job) => job.id)))
    await new Promise(() => {})
  } else {
    throw new Error(`unknown command ${command}`)
  }
  await boss.stop({ graceful: false, wait: false })
}

main().catch((error) => { console.error(error); process.exit(1) })
